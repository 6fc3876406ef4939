# Sourced by scripts/fuzz.sh and scripts/sanitize.sh: installs the sanitizer
# and libFuzzer runtimes (libclang-rt-22-dev; not in scripts/setup.sh, only
# these scripts need them).
if ! dpkg-query -W -f='${Status}' libclang-rt-22-dev 2>/dev/null | grep -q "install ok installed"; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends libclang-rt-22-dev
fi
