#!/usr/bin/env bash
# Issues the certificates of the metadata port's mutual TLS (docs/SECURITY.md,
# "Mutual TLS on the metadata port"), with openssl as the only certificate tool:
#
#   scripts/metadata-certs.sh OUT_DIR DOMAIN [--peer N=ADDRESS]... [--agent N]...
#                             [--operator NAME]... [--days DAYS]
#
#   scripts/metadata-certs.sh ./certs floe.example.com --peer 1=10.0.1.5 \
#     --peer 2=meta-2.internal --peer 3=meta-3.internal --agent 1 --agent 2 --operator alice
#
# OUT_DIR/ca.pem and ca-key.pem: the cluster CA (10 years), created unless OUT_DIR
# already holds both, which are then reused. For each identity named, a new key and
# a certificate signed by that CA (--days, 365 by default), replacing any earlier one:
#   peer-N.pem         spiffe://DOMAIN/floe/peer/N and ADDRESS (an IP or DNS SAN:
#                      the address agents, peers and floe admin dial); serverAuth, clientAuth
#   agent-N.pem        spiffe://DOMAIN/floe/agent/N; serverAuth (agents serve each
#                      other blocks on --peer-addr), clientAuth
#   operator-NAME.pem  spiffe://DOMAIN/floe/operator/NAME; clientAuth
# each with its key in -key.pem (ECDSA P-256, PKCS#8, mode 0600). Identities not
# named are left as they are.
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
  exit 2
}
die() {
  printf 'metadata-certs: %s\n' "$*" >&2
  exit 1
}

[[ $# -ge 2 && $1 != -* && $2 != -* ]] || usage
out=$1
domain=$2
shift 2

# A SPIFFE trust domain: lowercase letters, digits, dots, dashes and underscores.
[[ $domain =~ ^[a-z0-9._-]+$ && $domain != *..* && $domain != .* && $domain != *. ]] ||
  die "DOMAIN must be a trust domain of [a-z0-9._-] such as floe.example.com, not '$domain'"

days=365
peers=()     # "N=ADDRESS"
agents=()    # "N"
operators=() # "NAME"
while [[ $# -gt 0 ]]; do
  [[ $# -ge 2 ]] || die "$1 needs a value"
  case $1 in
    --peer) peers+=("$2") ;;
    --agent) agents+=("$2") ;;
    --operator) operators+=("$2") ;;
    --days) days=$2 ;;
    *) die "unknown option $1 (see the top of $0)" ;;
  esac
  shift 2
done
[[ $days =~ ^[1-9][0-9]{0,3}$ ]] || die "--days must be a whole number of days from 1 to 9999, not '$days'"

is_ipv4() {
  local IFS=. o
  local -a parts
  [[ $1 =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || return 1
  read -ra parts <<<"$1"
  for o in "${parts[@]}"; do
    [[ $o == 0 || $o != 0* ]] && ((10#$o <= 255)) || return 1
  done
}
is_ipv6() {
  local a=$1 g n=0 want=8
  local -a groups
  [[ $a == *:* && $a =~ ^[0-9A-Fa-f:.]+$ && $a != *:::* ]] || return 1
  if [[ $a == *::* ]]; then
    [[ ${a#*::} != *::* ]] || return 1
    a=${a/::/:z:}
    want=0
  fi
  [[ $a == :z:* ]] && a=${a#:}
  [[ $a == *:z: ]] && a=${a%:}
  [[ $a != :* && $a != *: ]] || return 1
  IFS=: read -ra groups <<<"$a"
  for g in "${groups[@]}"; do
    if [[ $g == z ]]; then
      continue
    elif [[ $g =~ ^[0-9A-Fa-f]{1,4}$ ]]; then
      n=$((n + 1))
    elif [[ $g == "${groups[-1]}" ]] && is_ipv4 "$g"; then
      n=$((n + 2))
    else
      return 1
    fi
  done
  ((want == 0 ? n < 8 : n == 8))
}
is_dns() {
  [[ ${#1} -le 253 && $1 =~ ^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$ ]] &&
    [[ ! $1 =~ ^[0-9.]+$ ]]
}

# identity name -> its SANs (lines of the extension file), extended key usage and,
# for the log, the SANs in one line.
declare -A san eku desc
names=()
add() {
  [[ -z ${san[$1]+set} ]] || die "$1 is named twice"
  names+=("$1")
  san[$1]=$2
  eku[$1]=$3
  desc[$1]=$4
}
for p in "${peers[@]+"${peers[@]}"}"; do
  [[ $p == *=* ]] || die "--peer takes N=ADDRESS (node id and the address it is dialed at), not '$p'"
  id=${p%%=*}
  addr=${p#*=}
  [[ $id =~ ^[1-9][0-9]{0,18}$ ]] || die "--peer $p: node ids are whole numbers from 1"
  if is_ipv4 "$addr" || is_ipv6 "$addr"; then
    kind=IP
  elif is_dns "$addr"; then
    kind=DNS
  else
    die "--peer $p: '$addr' is neither an IP address nor a DNS name (give the host alone, without a port)"
  fi
  uri=spiffe://$domain/floe/peer/$id
  add "peer-$id" "URI.1 = $uri
$kind.1 = $addr" "serverAuth, clientAuth" "URI:$uri $kind:$addr"
done
for id in "${agents[@]+"${agents[@]}"}"; do
  [[ $id =~ ^(0|[1-9][0-9]{0,18})$ ]] || die "--agent $id: agent ids are whole numbers"
  uri=spiffe://$domain/floe/agent/$id
  add "agent-$id" "URI.1 = $uri" "serverAuth, clientAuth" "URI:$uri"
done
for name in "${operators[@]+"${operators[@]}"}"; do
  [[ $name =~ ^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$ ]] ||
    die "--operator $name: names are 1 to 64 characters of [A-Za-z0-9._-], not starting with . or -"
  uri=spiffe://$domain/floe/operator/$name
  add "operator-$name" "URI.1 = $uri" "clientAuth" "URI:$uri"
done

command -v openssl >/dev/null || die "openssl not found"
[[ -d $out ]] || mkdir -p -m 0700 "$out"
tmp=$(mktemp -d "$out/.metadata-certs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
umask 077

# A config of our own, so the system's openssl.cnf adds no extension.
cat >"$tmp/openssl.cnf" <<'CNF'
[req]
distinguished_name = dn
prompt = no
[dn]
CNF

# openssl, quiet unless it fails.
ossl() {
  openssl "$@" 2>"$tmp/stderr" || die "openssl $1 failed: $(cat "$tmp/stderr")"
}
new_key() {
  ossl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"
  chmod 0600 "$1"
}
serial() {
  # 128 random bits, read as a positive number: unique with overwhelming odds.
  printf '0x%s' "$(openssl rand -hex 16)"
}
pubkey() {
  openssl pkey -pubout "$@" 2>/dev/null
}

# ---------------------------------------------------------------- the CA
ca=$out/ca.pem
ca_key=$out/ca-key.pem
if [[ -e $ca || -e $ca_key ]]; then
  [[ -f $ca && -f $ca_key ]] || die "$out has only one of ca.pem and ca-key.pem: restore the other or remove both"
  openssl x509 -in "$ca" -noout 2>/dev/null || die "$ca is not a PEM certificate"
  [[ "$(pubkey -in "$ca_key")" == "$(openssl x509 -in "$ca" -noout -pubkey)" ]] ||
    die "$ca_key is not the key of $ca"
  openssl x509 -in "$ca" -noout -checkend 0 >/dev/null || die "the CA in $ca has expired"
  # A CA this script made names its trust domain: every certificate has the same one.
  if [[ "$(openssl x509 -in "$ca" -noout -subject -nameopt RFC2253)" =~ (^|[=,])OU=([^,]+) ]] &&
    [[ ${BASH_REMATCH[2]} != "$domain" ]]; then
    die "the CA in $ca was made for trust domain ${BASH_REMATCH[2]}, not $domain"
  fi
  echo "metadata-certs: reusing the CA in $ca"
else
  cat "$tmp/openssl.cnf" - >"$tmp/ca.cnf" <<'CNF'
[ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
CNF
  new_key "$tmp/ca-key.pem"
  ossl req -new -x509 -config "$tmp/ca.cnf" -extensions ca -key "$tmp/ca-key.pem" -sha256 \
    -days 3650 -set_serial "$(serial)" -subj "/O=Floe/OU=$domain/CN=Floe metadata CA" \
    -out "$tmp/ca.pem"
  chmod 0644 "$tmp/ca.pem"
  mv "$tmp/ca-key.pem" "$ca_key"
  mv "$tmp/ca.pem" "$ca"
  echo "metadata-certs: new CA in $ca (valid 3650 days)"
fi
if ! openssl x509 -in "$ca" -noout -checkend $((days * 86400)) >/dev/null; then
  echo "metadata-certs: warning: the CA expires before certificates issued for $days days would" >&2
fi

# ---------------------------------------------------------------- the identities
for name in "${names[@]+"${names[@]}"}"; do
  cat >"$tmp/$name.ext" <<EXT
[leaf]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = ${eku[$name]}
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = @san
[san]
${san[$name]}
EXT
  new_key "$tmp/$name-key.pem"
  ossl req -new -config "$tmp/openssl.cnf" -key "$tmp/$name-key.pem" \
    -subj "/O=Floe/OU=$domain/CN=$name" -out "$tmp/$name.csr"
  ossl x509 -req -in "$tmp/$name.csr" -CA "$ca" -CAkey "$ca_key" -set_serial "$(serial)" \
    -days "$days" -sha256 -extensions leaf -extfile "$tmp/$name.ext" -out "$tmp/$name.pem"
  ossl verify -CAfile "$ca" "$tmp/$name.pem" >/dev/null
  chmod 0644 "$tmp/$name.pem"
  mv "$tmp/$name-key.pem" "$out/$name-key.pem"
  mv "$tmp/$name.pem" "$out/$name.pem"
  echo "metadata-certs: $out/$name.pem (${desc[$name]}; ${eku[$name]}; $days days)"
done
