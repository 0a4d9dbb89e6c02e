# The metadata port's certificates (pki.tf), one Secrets Manager secret per
# identity, JSON {"cert": PEM, "key": PEM (PKCS#8), "ca": PEM}, encrypted with
# secrets_kms_key_arn like the secrets the module is given (aws/secretsmanager
# when null). Instances read theirs at first boot, by ARN: metadata node N
# reads "peer-N", every agent "agent". The metadata role may read the three
# peer secrets, the agents' role the agent secret (iam.tf); the operator's is
# for people running floe admin, and no instance role may read it. The user
# data holds only the ARNs.

resource "aws_secretsmanager_secret" "metadata_tls" {
  #checkov:skip=CKV2_AWS_57:Certificates are Terraform resources: they are renewed by an apply (early_renewal_hours), not by a rotation Lambda.
  for_each                = local.metadata_tls_identities
  name_prefix             = "${var.name}/metadata-tls/${each.key}-"
  description             = "Floe ${var.name}: metadata port certificate and key of ${each.value.uri} (JSON cert, key, ca)."
  kms_key_id              = var.secrets_kms_key_arn
  recovery_window_in_days = 7

  tags = merge(local.tags, { Name = "${var.name}-metadata-tls-${each.key}", "floe:identity" = each.value.uri })
}

resource "aws_secretsmanager_secret_version" "metadata_tls" {
  for_each      = local.metadata_tls_identities
  secret_id     = aws_secretsmanager_secret.metadata_tls[each.key].id
  secret_string = jsonencode(local.metadata_tls_bundles[each.key])
}
