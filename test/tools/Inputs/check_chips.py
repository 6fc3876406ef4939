"""Checks python/kda/chips.py against `kda-compile --print-chips` (argv[1]):
the same chips, and for each the values the package keeps (vendor, warp size,
shared memory per block, default tiles) equal to the compiler's."""
import json
import sys

sys.path.insert(0, sys.argv[2])
from kda import chips  # noqa: E402

compiler = {row["chip"]: row for row in json.load(open(sys.argv[1]))["chips"]}
package = chips.CHIP_TABLE
if set(compiler) != set(package):
    sys.exit(f"chips differ: kda-compile {sorted(compiler)}, chips.py {sorted(package)}")
for chip, row in package.items():
    for key, value in row.items():
        if compiler[chip].get(key) != value:
            sys.exit(f"{chip}.{key}: chips.py says {value!r}, kda-compile {compiler[chip].get(key)!r}")
print(f"chips.py agrees with kda-compile on {len(package)} chips")
