"""Harnesses that measure or check the study from a checkout, beside the library rather than in
it: the throughput bench (`study bench`, `python -m tools.bench.architectures`), the GPU check
(`make gpu-bundle`, `make gpu-check`: tools/gpu/), the Slurm check (`make test-slurm`:
tools/slurm/) and the README's numbers block (`study readme-numbers`). They import `study`;
`study` never imports them but for those two subcommands, and `pip install .` leaves them out
(docs/architecture.md, "Rooms")."""
