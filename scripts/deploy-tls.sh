#!/usr/bin/env bash
# Certificate material for TLS between the agents and the collector (deploy/): a CA and a
# collector certificate for the collector Service's DNS names, then the Secret `hoptrace-tls` the
# manifests mount, printed on stdout:
#
#   bash scripts/deploy-tls.sh | kubectl apply -f -
#
# The files stay in --out (default ./hoptrace-tls, mode 0700): ca.crt (give it to whatever else
# talks to the collector: NODE_EXTRA_CA_CERTS=hoptrace-tls/ca.crt hoptrace capture …), ca.key
# (keep it, never in the cluster: a later run with the same --out reuses the CA, so a renewed
# collector certificate needs no change on the agents), tls.crt and tls.key (the collector's).
# The Secret holds ca.crt, tls.crt and tls.key; the agents mount only ca.crt.
#
# Names in the certificate: SERVICE, SERVICE.NAMESPACE, SERVICE.NAMESPACE.svc (the agents'
# --collector URL), SERVICE.NAMESPACE.svc.CLUSTER_DOMAIN, and localhost, 127.0.0.1 and ::1 for
# `kubectl port-forward`.
set -euo pipefail

usage() {
  echo "usage: bash scripts/deploy-tls.sh [--out DIR] [--namespace NS] [--service NAME] [--cluster-domain DOMAIN] [--days N]"
}

out=./hoptrace-tls
namespace=hoptrace
service=hoptrace-collector
domain=cluster.local
days=365
while [ "$#" -gt 0 ]; do
  case "$1" in
    --out | --namespace | --service | --cluster-domain | --days)
      if [ "$#" -lt 2 ]; then
        echo "deploy-tls: $1 needs a value" >&2
        usage >&2
        exit 2
      fi
      case "$1" in
        --out) out=$2 ;;
        --namespace) namespace=$2 ;;
        --service) service=$2 ;;
        --cluster-domain) domain=$2 ;;
        --days) days=$2 ;;
      esac
      shift 2
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "deploy-tls: unknown argument '$1'" >&2
      usage >&2
      exit 2
      ;;
  esac
done
# DNS labels (RFC 1123), as Kubernetes names them; a number of days.
label='^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
for v in "$namespace" "$service"; do
  [[ "$v" =~ $label ]] || { echo "deploy-tls: '$v' is not a Kubernetes name" >&2; exit 2; }
done
[[ "$domain" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || { echo "deploy-tls: '$domain' is not a domain" >&2; exit 2; }
[[ "$days" =~ ^[1-9][0-9]*$ ]] || { echo "deploy-tls: --days '$days' is not a number of days" >&2; exit 2; }
command -v openssl >/dev/null 2>&1 || { echo "deploy-tls: openssl is not installed" >&2; exit 1; }

umask 077
mkdir -p "$out"
cd "$out"
# openssl's chatter only when it fails.
ssl() {
  local err
  if ! err=$(openssl "$@" 2>&1 >/dev/null); then
    echo "deploy-tls: openssl $1 failed: $err" >&2
    exit 1
  fi
}
# ECDSA P-256 keys: small, and every TLS stack Node uses takes them.
if [ -s ca.key ] && [ -s ca.crt ]; then
  echo "deploy-tls: reusing the CA in $out" >&2
else
  ssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout ca.key -out ca.crt -days 3650 -subj "/CN=hoptrace CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
fi
fqdn="$service.$namespace.svc"
ssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout tls.key -out tls.csr -subj "/CN=$fqdn"
cat >tls.ext <<EOF
subjectAltName=DNS:$service,DNS:$service.$namespace,DNS:$fqdn,DNS:$fqdn.$domain,DNS:localhost,IP:127.0.0.1,IP:::1
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
EOF
ssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 16)" \
  -days "$days" -extfile tls.ext -out tls.crt
rm -f tls.csr tls.ext
openssl verify -CAfile ca.crt tls.crt >/dev/null

b64() { openssl base64 -A -in "$1"; }
echo "deploy-tls: wrote ca.crt, ca.key, tls.crt, tls.key in $out (certificate for $fqdn, $days days)" >&2
cat <<EOF
# The collector's TLS certificate and the CA the agents trust (scripts/deploy-tls.sh).
apiVersion: v1
kind: Secret
metadata:
  name: hoptrace-tls
  namespace: $namespace
  labels:
    app.kubernetes.io/name: hoptrace
type: kubernetes.io/tls
data:
  ca.crt: $(b64 ca.crt)
  tls.crt: $(b64 tls.crt)
  tls.key: $(b64 tls.key)
EOF
