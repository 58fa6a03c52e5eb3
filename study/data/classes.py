"""What each dataset's classes are, as plain Python: the registry, the plan (Snakemake's DAG)
and the figure jobs read this without importing torch or the loaders."""

from __future__ import annotations

CIFAR10_CLASS_NAMES: tuple[str, ...] = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
)
DIGIT_CLASS_NAMES: tuple[str, ...] = tuple(str(d) for d in range(10))  # MNIST, SVHN
TINYIMAGENET_NUM_CLASSES, TINYIMAGENET_IMAGE_SIZE = 200, 64  # names come with the data (words.txt)
IMAGENET_NUM_CLASSES = 1000  # names: the synset list placed with the validation set

# Superclass -> its five fine classes, from the dataset's page; names as in `meta`.
CIFAR100_SUPERCLASSES: dict[str, tuple[str, ...]] = {
    "aquatic_mammals": ("beaver", "dolphin", "otter", "seal", "whale"),
    "fish": ("aquarium_fish", "flatfish", "ray", "shark", "trout"),
    "flowers": ("orchid", "poppy", "rose", "sunflower", "tulip"),
    "food_containers": ("bottle", "bowl", "can", "cup", "plate"),
    "fruit_and_vegetables": ("apple", "mushroom", "orange", "pear", "sweet_pepper"),
    "household_electrical_devices": ("clock", "keyboard", "lamp", "telephone", "television"),
    "household_furniture": ("bed", "chair", "couch", "table", "wardrobe"),
    "insects": ("bee", "beetle", "butterfly", "caterpillar", "cockroach"),
    "large_carnivores": ("bear", "leopard", "lion", "tiger", "wolf"),
    "large_man-made_outdoor_things": ("bridge", "castle", "house", "road", "skyscraper"),
    "large_natural_outdoor_scenes": ("cloud", "forest", "mountain", "plain", "sea"),
    "large_omnivores_and_herbivores": ("camel", "cattle", "chimpanzee", "elephant", "kangaroo"),
    "medium_mammals": ("fox", "porcupine", "possum", "raccoon", "skunk"),
    "non-insect_invertebrates": ("crab", "lobster", "snail", "spider", "worm"),
    "people": ("baby", "boy", "girl", "man", "woman"),
    "reptiles": ("crocodile", "dinosaur", "lizard", "snake", "turtle"),
    "small_mammals": ("hamster", "mouse", "rabbit", "shrew", "squirrel"),
    "trees": ("maple_tree", "oak_tree", "palm_tree", "pine_tree", "willow_tree"),
    "vehicles_1": ("bicycle", "bus", "motorcycle", "pickup_truck", "train"),
    "vehicles_2": ("lawn_mower", "rocket", "streetcar", "tank", "tractor"),
}
# The official label order is alphabetical, for fine and coarse names alike.
CIFAR100_CLASS_NAMES: tuple[str, ...] = tuple(sorted(f for fs in CIFAR100_SUPERCLASSES.values() for f in fs))
CIFAR100_SUPERCLASS_NAMES: tuple[str, ...] = tuple(sorted(CIFAR100_SUPERCLASSES))
CIFAR100_FINE_TO_COARSE: tuple[int, ...] = tuple(
    next(i for i, s in enumerate(CIFAR100_SUPERCLASS_NAMES) if fine in CIFAR100_SUPERCLASSES[s])
    for fine in CIFAR100_CLASS_NAMES
)

#: dataset -> (superclass names, superclass index of every class)
SUPERCLASSES: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {
    "cifar100": (CIFAR100_SUPERCLASS_NAMES, CIFAR100_FINE_TO_COARSE),
}
