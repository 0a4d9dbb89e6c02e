#!/usr/bin/env bash
# Builds the previous version's `floe` (the commit in tests/upgrade/previous-version) for the
# rolling-upgrade test, once: the binary is kept under $CARGO_TARGET_DIR/previous/<commit>/floe
# and the path printed on the last line.
#
# The source is exported to one fixed directory and built in the same target directory as
# today's code, so dependencies already built are reused. Both builds write target/debug/floe, so today's binary there is put
# back afterwards.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/floe-target}"

rev="$(grep -v '^#' tests/upgrade/previous-version | head -1 | tr -d '[:space:]')"
if ! commit="$(git -C "$ROOT" rev-parse --verify --quiet "$rev^{commit}")"; then
  echo "the previous version $rev is not in this clone's history (a shallow clone?): fetch it" >&2
  exit 1
fi
out="$CARGO_TARGET_DIR/previous/$commit"
if [[ -x "$out/floe" ]]; then
  echo "previous version present: $out/floe"
  echo "$out/floe"
  exit 0
fi
src="${FLOE_PREVIOUS_SRC:-/var/tmp/floe-previous-src}"
echo "building the previous version ${commit:0:12} from $src (once; kept in $out)"
rm -rf "$src"
mkdir -p "$src" "$out"
git -C "$ROOT" archive "$commit" | tar -x -C "$src"
# Its own crates get a version of their own, so their artifacts never share a hash with today's:
# cargo judges freshness by file times, the archive's files are older than today's build, and
# with the same hashes it would hand back today's binary as the previous one. The dependencies,
# built with the same profile, are shared.
find "$src" -name Cargo.toml -not -path '*/fuzz/*' \
  -exec sed -i '0,/^version = "\(.*\)"$/s//version = "\1-previous"/' {} +
today="$CARGO_TARGET_DIR/debug/floe"
if [[ -e "$today" ]]; then
  mv "$today" "$out/today.floe"
  trap 'mv -f "$out/today.floe" "$today"' EXIT
fi
# Today's [profile.dev] (Cargo.toml, read with Python's tomllib), which the previous version's
# Cargo.toml may not have: settings from --config win over the manifest's, and equal settings
# let this build reuse the dependencies today's build compiled.
mapfile -t profile < <(python3 - "$ROOT/Cargo.toml" <<'EOF'
import json, sys, tomllib
dev = tomllib.load(open(sys.argv[1], "rb"))["profile"]["dev"]
for key in ("debug", "opt-level"):
    if key in dev:
        print("--config")
        print(f"profile.dev.{key}={json.dumps(dev[key])}")
for package, settings in dev.get("package", {}).items():
    for key, value in settings.items():
        print("--config")
        print(f"profile.dev.package.{json.dumps(package)}.{key}={json.dumps(value)}")
EOF
)
(cd "$src" && cargo build --quiet -p floe --bin floe "${profile[@]}")
mv "$today" "$out/floe.partial"
mv "$out/floe.partial" "$out/floe"
echo "$out/floe"
