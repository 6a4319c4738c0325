#!/usr/bin/env bash
# test/apiserver/gencerts.sh OUTDIR [--force]
# Test PKI for the fake API server (fakeapi.py) and the agent's TLS tests, made
# with the openssl CLI only. Test material: never use it outside tests.
#
#   ca.crt/.key            the trusted CA (clients verify the server with it;
#                          fakeapi --client-ca verifies client certs with it)
#   server.crt/.key        signed by ca: SAN IP:127.0.0.1, IP:::1, DNS:localhost
#   client.crt/.key        signed by ca, clientAuth, CN=aiqos-test-client
#   other-ca.crt/.key      an unrelated CA ("certificate mismatch" tests)
#   other-server.crt/.key  signed by other-ca, same SANs as server.crt
#   other-client.crt/.key  signed by other-ca, clientAuth (rejected by the server)
#   wronghost.crt/.key     signed by ca, SAN DNS:wrong.invalid only (hostname mismatch)
#
# Idempotent: an existing complete set is kept unless --force is given.
set -euo pipefail

usage() { echo "usage: $0 OUTDIR [--force]" >&2; exit 2; }
[ $# -ge 1 ] || usage
out=$1
force=${2:-}
[ -z "$force" ] || [ "$force" = --force ] || usage

files="ca.crt ca.key server.crt server.key client.crt client.key other-ca.crt other-ca.key
other-server.crt other-server.key other-client.crt other-client.key wronghost.crt wronghost.key"

mkdir -p "$out"
cd "$out"

if [ -z "$force" ] && [ -f .complete ]; then
	missing=0
	for f in $files; do [ -s "$f" ] || missing=1; done
	[ "$missing" -eq 1 ] || exit 0
fi
rm -f .complete

days=3650
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

genkey() { # FILE
	(umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1")
}

mkca() { # NAME CN
	genkey "$1.key"
	cat >"$tmp/$1.cnf" <<EOF
[req]
distinguished_name = dn
prompt = no
[dn]
CN = $2
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
EOF
	openssl req -x509 -new -sha256 -days "$days" -config "$tmp/$1.cnf" -extensions v3_ca \
		-key "$1.key" -out "$1.crt"
}

mkleaf() { # NAME CA CN EKU SAN(or empty) [O]
	local name=$1 ca=$2 cn=$3 eku=$4 san=$5 org=${6:-}
	genkey "$name.key"
	{
		printf '[req]\ndistinguished_name = dn\nprompt = no\n[dn]\n'
		[ -z "$org" ] || printf 'O = %s\n' "$org"
		printf 'CN = %s\n' "$cn"
	} >"$tmp/$name.cnf"
	{
		printf 'basicConstraints = critical,CA:FALSE\n'
		printf 'keyUsage = critical,digitalSignature\n'
		printf 'extendedKeyUsage = %s\n' "$eku"
		printf 'subjectKeyIdentifier = hash\n'
		printf 'authorityKeyIdentifier = keyid,issuer\n'
		[ -z "$san" ] || printf 'subjectAltName = %s\n' "$san"
	} >"$tmp/$name.ext"
	openssl req -new -sha256 -config "$tmp/$name.cnf" -key "$name.key" -out "$tmp/$name.csr"
	openssl x509 -req -sha256 -days "$days" -in "$tmp/$name.csr" -CA "$ca.crt" -CAkey "$ca.key" \
		-set_serial "0x$(openssl rand -hex 16)" -extfile "$tmp/$name.ext" -out "$name.crt" 2>/dev/null
}

san_local="IP:127.0.0.1,IP:::1,DNS:localhost"

mkca ca aiqos-test-ca
mkca other-ca aiqos-unrelated-test-ca
mkleaf server ca aiqos-fakeapi serverAuth "$san_local"
mkleaf client ca aiqos-test-client clientAuth "" aiqos-test
mkleaf other-server other-ca aiqos-fakeapi serverAuth "$san_local"
mkleaf other-client other-ca aiqos-test-client clientAuth "" aiqos-test
mkleaf wronghost ca wrong.invalid serverAuth "DNS:wrong.invalid"

# Sanity: the chains must verify the way the tests expect.
openssl verify -CAfile ca.crt server.crt client.crt wronghost.crt >/dev/null
openssl verify -CAfile other-ca.crt other-server.crt other-client.crt >/dev/null
if openssl verify -CAfile ca.crt other-server.crt >/dev/null 2>&1; then
	echo "gencerts: other-server.crt unexpectedly verifies against ca.crt" >&2
	exit 1
fi
touch .complete
