#!/usr/bin/env bash
# Offline checks of terraform/ (no provider can be downloaded here):
#   1. terraform fmt -check -recursive   (skipped when no terraform binary)
#   2. pytest tests/terraform            (python-hcl2 structural test, rendered
#                                         templates, scripts/metadata-certs.sh)
#   3. checkov                           (no failed checks; no parsing errors)
#
#   bash scripts/test-terraform.sh
#
# Tools live in a venv installed once per set of pins below, under $FLOE_VENVS
# (outside the clone, like the test venv; .venv-checkov links to it), so a
# fresh clone finds them ready. checkov brings its own fork of the HCL parser
# (module name `hcl2`), so python-hcl2 goes into the venv's hcl2-lib and only
# pytest sees it (PYTHONPATH).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

# Pinned tool versions. pytest stays on 8.x: checkov 3.3 pins packaging<24,
# which pytest 9 cannot use.
CHECKOV_VERSION=3.3.30
PYTEST_VERSION=8.4.2
PYTHON_HCL2_VERSION=8.1.4

step() { printf '==> %s\n' "$*"; }
fail() { printf 'test-terraform: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- tools
want="$(printf 'checkov=%s pytest=%s python-hcl2=%s\n' "$CHECKOV_VERSION" "$PYTEST_VERSION" "$PYTHON_HCL2_VERSION" \
  | sha256sum | cut -d' ' -f1)"
# A .venv-checkov that is a directory of its own (an older clone's) is kept and used as before.
if [[ ! -d "$ROOT/.venv-checkov" || -L "$ROOT/.venv-checkov" ]]; then
  shared="${FLOE_VENVS:-/var/tmp/floe-venvs}/checkov-${want:0:16}"
  mkdir -p "$shared"
  ln -sfn "$shared" "$ROOT/.venv-checkov"
fi
# Installed through its real path: pip writes that path into each script's #! line.
VENV="$(readlink -f "$ROOT/.venv-checkov")"
HCL2_LIB="$VENV/hcl2-lib"
STAMP="$VENV/.pins.sha256"
step "tools ($VENV: checkov $CHECKOV_VERSION, pytest $PYTEST_VERSION, python-hcl2 $PYTHON_HCL2_VERSION)"
have=""
[[ -f "$STAMP" ]] && have="$(cat "$STAMP")"
if [[ "$have" == "$want" && -x "$VENV/bin/checkov" && -d "$HCL2_LIB/hcl2" ]]; then
  echo "up to date"
else
  [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
  pip=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
  "${pip[@]}" "checkov==$CHECKOV_VERSION" "pytest==$PYTEST_VERSION"
  rm -rf "$HCL2_LIB"
  "${pip[@]}" --target "$HCL2_LIB" "python-hcl2==$PYTHON_HCL2_VERSION"
  echo "$want" >"$STAMP"
  echo "installed"
fi

# ---------------------------------------------------------------- fmt
if command -v terraform >/dev/null 2>&1; then
  step "terraform fmt -check -recursive terraform/ ($(terraform version 2>/dev/null | head -n1))"
  if ! terraform fmt -check -recursive -diff terraform/ 2>/dev/null; then
    fail "terraform fmt found unformatted files (run: terraform fmt -recursive terraform/)"
  fi
  echo "formatted"
else
  step "terraform fmt: skipped (no terraform binary on PATH)"
fi

# ---------------------------------------------------------------- structure
step "pytest tests/terraform (python-hcl2 structural checks)"
set +e
PYTHONPATH="$HCL2_LIB" "$VENV/bin/python" -m pytest tests/terraform -q -p no:cacheprovider
rc=$?
set -e
[[ $rc -eq 5 ]] && fail "pytest collected no tests"
[[ $rc -ne 0 ]] && fail "structural tests failed (pytest exit $rc)"

# ---------------------------------------------------------------- checkov
step "checkov -d terraform"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
set +e
BC_SKIP_MAPPING=TRUE "$VENV/bin/checkov" -d terraform --skip-download --compact --quiet >"$out" 2>&1
rc=$?
set -e
cat "$out"
# A file checkov cannot parse is reported, not failed: catch it here.
if grep -Eq 'Parsing errors: *[1-9]' "$out"; then
  fail "checkov could not parse some files"
fi
summary="$(grep -E 'Passed checks: [0-9]+, Failed checks: [0-9]+' "$out" || true)"
[[ -n "$summary" ]] || fail "checkov printed no summary (exit $rc)"
[[ $rc -ne 0 ]] && fail "checkov reported failed checks (exit $rc)"
if ! grep -q 'Failed checks: 0,' <<<"$summary"; then
  fail "checkov reported failed checks"
fi
echo "checkov: $summary"
step "terraform checks passed"
