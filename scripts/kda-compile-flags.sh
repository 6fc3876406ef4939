# Sourced by build-gpu-bundles.sh and build-bench-bundles.sh: where
# KDA_COMPILE_FLAGS is set, KDA_COMPILE becomes a wrapper adding those flags
# to every kda-compile run (kda.prebuild runs $KDA_COMPILE), removed on exit.
if [ -n "${KDA_COMPILE_FLAGS:-}" ]; then
  wrap=$(mktemp -d "${TMPDIR:-/tmp}/kda-compile.XXXXXX")
  trap 'rm -rf "$wrap"' EXIT
  printf '#!/bin/sh\nexec "%s" "$@" %s\n' "$KDA_COMPILE" "$KDA_COMPILE_FLAGS" > "$wrap/kda-compile"
  chmod +x "$wrap/kda-compile"
  export KDA_COMPILE=$wrap/kda-compile
fi
