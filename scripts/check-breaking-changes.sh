#!/usr/bin/env bash
# Breaking-change check of the contract: compares spec/openapi.yaml with a base revision using Optic
# (`optic diff … --check`, its standard breaking-change rules), offline (telemetry off, no stdin).
# A breaking change passes only when info.version differs from the base's and CHANGELOG.md has a
# "## <that version>" section. Pages for people (`x-browser-page: true`) are left out. See docs/contract.md.
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

# Pages for people (x-browser-page on either side) are not what clients are generated from: both sides lose them.
without_pages() { # <base in> <new in> <base out> <new out>
  node --input-type=module -e "
    import fs from 'node:fs'; import { parse, stringify } from 'yaml';
    const [base, next] = process.argv.slice(1, 3).map((file) => parse(fs.readFileSync(file, 'utf8')));
    const isPage = (spec, path, method) => spec.paths?.[path]?.[method]?.['x-browser-page'] === true;
    for (const spec of [base, next]) {
      for (const [path, item] of Object.entries(spec.paths ?? {})) {
        for (const method of Object.keys(item)) if (isPage(base, path, method) || isPage(next, path, method)) delete item[method];
        if (!Object.values(item).some((op) => op?.responses)) delete spec.paths[path];
      }
    }
    fs.writeFileSync(process.argv[3], stringify(base, { aliasDuplicateObjects: false }));
    fs.writeFileSync(process.argv[4], stringify(next, { aliasDuplicateObjects: false }));
  " "$@"
}

compared=$(mktemp -d)
trap 'rm -rf "$compared"' EXIT
git show "$base:$SPEC" >"$compared/base-full.yaml"
without_pages "$compared/base-full.yaml" "$SPEC" "$compared/base.yaml" "$compared/openapi.yaml"

export OPTIC_TELEMETRY_LEVEL=off
if npx --no-install optic diff "$compared/base.yaml" "$compared/openapi.yaml" --check </dev/null; then
  echo "contract check: no breaking change"
  exit 0
fi

old_version=$(spec_version "$compared/base-full.yaml")
new_version=$(spec_version "$SPEC")
if [ "$old_version" != "$new_version" ] && [ -f CHANGELOG.md ] &&
  grep -Eq "^## \[?${new_version//./\\.}\]?([^0-9.]|$)" CHANGELOG.md; then
  echo "contract check: breaking change(s) above, declared: info.version $old_version → $new_version and CHANGELOG.md names $new_version"
  exit 0
fi
echo "contract check FAILED: breaking change(s) above. Either make the change compatible, or change info.version"
echo "(now $new_version, base $old_version) and add a \"## $new_version\" section to CHANGELOG.md that names each breaking change."
exit 1
