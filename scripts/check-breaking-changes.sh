#!/usr/bin/env bash
# Breaking-change check of the contract: compares spec/openapi.yaml with a base revision using Optic
# (`optic diff … --check`, its standard breaking-change rules), offline (telemetry off, no stdin).
# A breaking change passes only when info.version differs from the base's and CHANGELOG.md has a
# "## <that version>" section. See docs/contract.md.
#
# Base: $CONTRACT_BASE if set; else the merge base with main (origin/main or main) when it is not
# HEAD itself; else the last tag before HEAD; else the previous commit (HEAD~1); with none of these
# (a first commit) there is nothing to compare. The base used is printed.
set -uo pipefail
cd "$(dirname "$0")/.."

SPEC=spec/openapi.yaml

base_ref() {
  if [ -n "${CONTRACT_BASE:-}" ]; then echo "$CONTRACT_BASE (CONTRACT_BASE)"; return; fi
  local head main mb tag
  head=$(git rev-parse HEAD)
  for main in origin/main main; do
    if git rev-parse --verify -q "$main^{commit}" >/dev/null; then
      mb=$(git merge-base HEAD "$main" 2>/dev/null || true)
      if [ -n "$mb" ] && [ "$mb" != "$head" ]; then echo "$mb (merge base with $main)"; return; fi
    fi
  done
  tag=$(git describe --tags --abbrev=0 HEAD~1 2>/dev/null || true)
  if [ -n "$tag" ]; then echo "$tag (last tag)"; return; fi
  if git rev-parse --verify -q HEAD~1 >/dev/null; then echo "$(git rev-parse HEAD~1) (previous commit)"; return; fi
}

spec_version() { # <file> → info.version
  node --input-type=module -e "
    import fs from 'node:fs'; import { parse } from 'yaml';
    process.stdout.write(String(parse(fs.readFileSync(process.argv[1], 'utf8'))?.info?.version ?? ''));
  " "$1"
}

found=$(base_ref)
if [ -z "$found" ]; then
  echo "contract check: no base revision (first commit, no tag): nothing to compare"
  exit 0
fi
base=${found%% *}
echo "contract check: $SPEC against $found"

if ! git cat-file -e "$base:$SPEC" 2>/dev/null; then
  echo "contract check: $SPEC does not exist at the base: nothing to compare"
  exit 0
fi

export OPTIC_TELEMETRY_LEVEL=off
if npx --no-install optic diff "$SPEC" --base "$base" --check </dev/null; then
  echo "contract check: no breaking change"
  exit 0
fi

old_spec=$(mktemp)
git show "$base:$SPEC" >"$old_spec"
old_version=$(spec_version "$old_spec")
new_version=$(spec_version "$SPEC")
rm -f "$old_spec"
if [ "$old_version" != "$new_version" ] && [ -f CHANGELOG.md ] &&
  grep -Eq "^## \[?${new_version//./\\.}\]?([^0-9.]|$)" CHANGELOG.md; then
  echo "contract check: breaking change(s) above, declared: info.version $old_version → $new_version and CHANGELOG.md names $new_version"
  exit 0
fi
echo "contract check FAILED: breaking change(s) above. Either make the change compatible, or change info.version"
echo "(now $new_version, base $old_version) and add a \"## $new_version\" section to CHANGELOG.md that names each breaking change."
exit 1
