# Functions that read secrets from Secrets Manager into files, shared by the
# agents' and metadata nodes' prepare scripts (read with file(), not a
# template). No secret value is ever traced or printed.

# Prints the SecretString of the secret $1 (read in the secret's own region),
# retrying while Secrets Manager is unreachable.
secret_value() {
  local attempt value
  for attempt in 1 2 3 4 5 6; do
    if value=$(aws secretsmanager get-secret-value --region "$(cut -d: -f4 <<<"$1")" \
      --secret-id "$1" --query SecretString --output text); then
      printf '%s' "$value"
      return 0
    fi
    sleep $((attempt * 5))
  done
  echo "floe-prepare: cannot read secret $1 (does the role reach Secrets Manager: NAT or a VPC endpoint?)" >&2
  return 1
}

# write_pem_files ARN FIELD=PATH...: the secret ARN is JSON whose FIELDs hold
# PEM ("key" a private key, any other field a certificate). Every field is
# checked before any file is written; each file is then replaced whole, mode
# 0600, owned by floe.
write_pem_files() {
  local arn=$1 spec
  local -a paths=()
  shift
  for spec in "$@"; do paths+=("${spec#*=}"); done
  secret_value "$arn" | python3 -c '
import json, os, sys

specs = [arg.split("=", 1) for arg in sys.argv[2:]]
fields = ", ".join("\"%s\": PEM" % field for field, _ in specs)
try:
    doc = json.load(sys.stdin)
except ValueError:
    doc = None
files = []
for field, path in specs:
    marker = "PRIVATE KEY" if field == "key" else "CERTIFICATE"
    pem = doc.get(field) if isinstance(doc, dict) else None
    if not isinstance(pem, str) or "-----BEGIN " not in pem or marker not in pem:
        sys.exit("floe-prepare: secret %s needs a PEM \"%s\" field (JSON {%s})" % (sys.argv[1], field, fields))
    files.append((path, pem))
for path, pem in files:
    tmp = path + ".new"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(pem if pem.endswith("\n") else pem + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
' "$arn" "$@"
  chown floe:floe "${paths[@]}"
}

# write_operator_token ARN PATH: the secret ARN is the operator token (at least
# 24 characters), written to PATH, mode 0600, owned by floe.
write_operator_token() {
  local token
  token=$(secret_value "$1")
  token=$(printf '%s' "$token" | tr -d '\r\n')
  if [ "${#token}" -lt 24 ]; then
    echo "floe-prepare: the operator token in $1 is shorter than 24 characters" >&2
    return 1
  fi
  install -m 0600 -o floe -g floe /dev/null "$2"
  printf '%s\n' "$token" >"$2"
}
