#!/usr/bin/env bash
# Proves the README's set-up on a fresh machine: a clean Debian bookworm root (debootstrap
# --variant=minbase, nothing else installed), this machine's package-registry settings (pip's
# configuration and the CA certificates the system trusts, as a fresh machine of this kind has
# them), a clean clone of HEAD, and the README's main command run inside it with chroot; with
# --tests the README's test command too. Prints the elapsed time and the result; cleans up after
# itself, also on failure. Run it whenever setup.sh, CMakeLists.txt or a dependency changes.
#   scripts/fresh_machine_check.sh [--tests] [--keep] [--root DIR]
#   --keep      leave the root in place (for a look inside after a failure)
#   --root DIR  where to build the root (default: a new folder under /var/tmp)
# Needs root; installs debootstrap when it is missing.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

tests=0 keep=0 root=""
while (($#)); do
  case "$1" in
    --tests) tests=1 ;;
    --keep) keep=1 ;;
    --root) root="$2"; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "fresh_machine_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $(id -u) -eq 0 ]] || { echo "fresh_machine_check: needs root (chroot, mount)" >&2; exit 2; }
# debootstrap is this script's own tool (brrr does not need it): installed here when missing.
if ! command -v debootstrap >/dev/null; then
  echo "fresh_machine_check: installing debootstrap"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    debootstrap >/dev/null || { echo "fresh_machine_check: cannot install debootstrap" >&2; exit 2; }
fi

# The README's two commands, read from the README itself so that this checks what users type.
readme_block() {  # the first line of the first ```sh block after the heading $1
  awk -v h="$1" '$0 == h {f=1; next} f && /^```sh/ {getline; print; exit}' "$repo/README.md"
}
main_cmd=$(readme_block "## Run a model (main job)")
test_cmd=$(readme_block "## Tests")
[[ -n "$main_cmd" && -n "$test_cmd" ]] || {
  echo "fresh_machine_check: cannot find the main or test command in README.md" >&2; exit 2; }

[[ -n "$root" ]] || root=$(mktemp -d /var/tmp/brrr-fresh.XXXXXX)
mkdir -p "$root"
start=$(date +%s)
mounted=()
cleanup() {
  local rc=$?
  for ((i=${#mounted[@]}-1; i>=0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
  if ((keep)); then echo "fresh_machine_check: root kept in $root"
  else rm -rf --one-file-system "$root"; fi
  local el=$(( $(date +%s) - start ))
  if ((rc == 0)); then echo "fresh_machine_check: PASS in $((el / 60)) min $((el % 60)) s"
  else echo "fresh_machine_check: FAIL (exit $rc) after $((el / 60)) min $((el % 60)) s"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { echo "fresh_machine_check: [$(( $(date +%s) - start )) s] $*"; }

step "debootstrap --variant=minbase bookworm $root"
debootstrap --variant=minbase bookworm "$root" >"$root.debootstrap.log" 2>&1 || {
  tail -20 "$root.debootstrap.log"; rm -f "$root.debootstrap.log"; exit 1; }
rm -f "$root.debootstrap.log"

# Registry settings as a fresh machine of this kind has them: pip's configuration, the CA bundle.
step "copying pip configuration and CA certificates"
[[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$root/etc/pip.conf"
# The bundle goes in twice: as the system bundle, and as a local CA file so that the bundle
# apt's ca-certificates package regenerates on install still holds this machine's registry CAs.
mkdir -p "$root/etc/ssl/certs" "$root/usr/local/share/ca-certificates"
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
cp -L /etc/ssl/certs/ca-certificates.crt "$root/usr/local/share/ca-certificates/host-bundle.crt"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
pip_env=()
while IFS='=' read -r k v; do pip_env+=("$k=$v"); done < <(env | grep -E '^(PIP_|SSL_CERT_|REQUESTS_CA_BUNDLE=)' || true)

step "cloning HEAD ($(git -C "$repo" rev-parse --short HEAD)) into the root"
git clone --quiet --no-hardlinks "$repo" "$root/work/brrr"
git -C "$root/work/brrr" checkout --quiet "$(git -C "$repo" rev-parse HEAD)"

for m in proc dev dev/shm; do
  mkdir -p "$root/$m"
  case $m in
    proc) mount -t proc proc "$root/proc" ;;
    dev) mount --bind /dev "$root/dev" ;;
    dev/shm) mount -t tmpfs shm "$root/dev/shm" ;;
  esac
  mounted+=("$root/$m")
done

in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${pip_env[@]}" \
    ${BRRR_JOBS:+BRRR_JOBS=$BRRR_JOBS} /bin/bash -c "cd /work/brrr && $1"
}
step "main command: $main_cmd"
in_root "$main_cmd"
if ((tests)); then
  step "test command: $test_cmd"
  in_root "$test_cmd"
fi
