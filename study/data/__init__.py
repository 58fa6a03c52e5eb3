"""Datasets of the study, in layers (each module imports only those above it in this list):

    splits       Splits (uint8 images + labels in memory) and class-stratified subsets
    download     fetching archives: mirror first, then the network, checksums
    images, ...  one loader module per dataset format (cifar10, cifar100, mnist, svhn,
                 tinyimagenet, imagenet, synthetic), each building a Splits
    registry     the one table of datasets and their variants: the only module that
                 knows every loader
    prepared     the prepared file of a dataset variant (fetch, load, save, read back)
    augment, batches, corruptions, cifar10c   what training and evaluation do with images
"""
