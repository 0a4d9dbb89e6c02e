# Certificates for mutual TLS on the metadata port (docs/SECURITY.md, "Mutual
# TLS on the metadata port"): a cluster CA, and a key and certificate for each
# of local.metadata_tls_identities. secrets.tf hands them to the instances.
# Only this file uses the tls provider; the rest of the module reads what it
# makes through the locals at the bottom.
#
# STATE: the tls provider keeps every private key it makes, the CA's among
# them, in the Terraform state, unencrypted. That is the accepted price of a
# module that needs no PKI of its own. Keep the state in an encrypted backend
# (S3 with SSE-KMS, say) that only those who may apply can read: whoever reads
# the state can impersonate any metadata node, agent or operator, and mint
# certificates for more.

resource "tls_private_key" "metadata_ca" {
  count       = var.metadata_mtls ? 1 : 0
  algorithm   = "ECDSA"
  ecdsa_curve = "P256"
}

# Replacing the CA (any change below, or the end of its 10 years) replaces
# every certificate at once, and nodes holding certificates of the old CA no
# longer talk to nodes holding the new: roll every node at once, or rotate by
# hand with both CAs in the CA file (docs/SECURITY.md).
resource "tls_self_signed_cert" "metadata_ca" {
  count           = var.metadata_mtls ? 1 : 0
  private_key_pem = tls_private_key.metadata_ca[0].private_key_pem

  subject {
    common_name         = "Floe metadata CA"
    organization        = "Floe"
    organizational_unit = local.metadata_trust_domain
  }

  is_ca_certificate     = true
  set_subject_key_id    = true
  validity_period_hours = 10 * 365 * 24
  allowed_uses          = ["cert_signing", "crl_signing"]
}

resource "tls_private_key" "metadata" {
  for_each    = local.metadata_tls_identities
  algorithm   = "ECDSA"
  ecdsa_curve = "P256"
}

resource "tls_cert_request" "metadata" {
  for_each        = local.metadata_tls_identities
  private_key_pem = tls_private_key.metadata[each.key].private_key_pem
  uris            = [each.value.uri]
  dns_names       = each.value.dns_names

  subject {
    common_name         = each.key
    organization        = "Floe"
    organizational_unit = local.metadata_trust_domain
  }
}

# Peers and agents serve and connect (serverAuth and clientAuth: agents serve
# each other blocks); the operator only connects (clientAuth).
resource "tls_locally_signed_cert" "metadata" {
  for_each           = local.metadata_tls_identities
  cert_request_pem   = tls_cert_request.metadata[each.key].cert_request_pem
  ca_private_key_pem = tls_private_key.metadata_ca[0].private_key_pem
  ca_cert_pem        = tls_self_signed_cert.metadata_ca[0].cert_pem

  set_subject_key_id    = true
  validity_period_hours = var.metadata_tls_validity_days * 24
  # The first apply within 30 days of expiry issues a new certificate.
  early_renewal_hours = 30 * 24
  allowed_uses        = each.value.uses
}

locals {
  # Identity -> {cert, key, ca}: the value of its secret (secrets.tf). Keys in
  # PKCS#8 PEM.
  metadata_tls_bundles = {
    for k, cert in tls_locally_signed_cert.metadata : k => {
      cert = cert.cert_pem
      key  = tls_private_key.metadata[k].private_key_pem_pkcs8
      ca   = tls_self_signed_cert.metadata_ca[0].cert_pem
    }
  }

  # The agents' certificate serial, in their user data: a new certificate is a
  # new launch template version, which rolls the group onto it.
  metadata_tls_agent_serial = var.metadata_mtls ? tls_locally_signed_cert.metadata["agent"].id : ""

  metadata_tls_ca_cert_pem = var.metadata_mtls ? tls_self_signed_cert.metadata_ca[0].cert_pem : null
}
