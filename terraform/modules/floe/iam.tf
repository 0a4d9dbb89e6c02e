# One role for agents and metadata nodes: both read and write objects under the
# prefix (segments; metadata snapshots) and nothing else in S3. With
# tls_secret_arn or operator_token_secret_arn it may also read those secrets,
# by their full ARNs, and nothing else in Secrets Manager.

data "aws_iam_policy_document" "assume_ec2" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "floe" {
  name               = "${var.name}-floe"
  description        = "Floe agents and metadata nodes: objects under s3://${local.bucket_name}/${var.bucket_prefix}/ only."
  assume_role_policy = data.aws_iam_policy_document.assume_ec2.json

  tags = merge(local.tags, { Name = "${var.name}-floe" })
}

data "aws_iam_policy_document" "floe" {
  statement {
    sid = "FloeObjects"
    actions = [
      "s3:GetObject",
      "s3:PutObject",
      "s3:DeleteObject",
      "s3:AbortMultipartUpload",
      "s3:ListMultipartUploadParts",
    ]
    resources = [local.prefix_object_arn]
  }

  statement {
    sid       = "FloeList"
    actions   = ["s3:ListBucket"]
    resources = [local.bucket_arn]

    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["${var.bucket_prefix}/*", var.bucket_prefix]
    }
  }

  # Read-only bucket settings that `floe doctor` checks (lifecycle, encryption, region).
  statement {
    sid = "FloeBucketChecks"
    actions = [
      "s3:GetBucketLocation",
      "s3:GetEncryptionConfiguration",
      "s3:GetLifecycleConfiguration",
    ]
    resources = [local.bucket_arn]
  }

  dynamic "statement" {
    for_each = var.kms_key_arn == null ? [] : [var.kms_key_arn]
    content {
      sid       = "FloeBucketKey"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [statement.value]

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${local.region}.amazonaws.com"]
      }
    }
  }

  dynamic "statement" {
    for_each = local.binary_s3_object_arn == null ? [] : [local.binary_s3_object_arn]
    content {
      sid       = "FloeBinary"
      actions   = ["s3:GetObject"]
      resources = [statement.value]
    }
  }

  # The agents read their TLS certificate and operator token at boot: these
  # two secrets only, read only (no listing, no describing, no writing).
  dynamic "statement" {
    for_each = length(local.secret_arns) == 0 ? [] : [local.secret_arns]
    content {
      sid       = "FloeSecrets"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = statement.value
    }
  }

  dynamic "statement" {
    for_each = var.secrets_kms_key_arn == null || length(local.secret_arns) == 0 ? [] : [var.secrets_kms_key_arn]
    content {
      sid       = "FloeSecretsKey"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = distinct([for arn in local.secret_arns : "secretsmanager.${split(":", arn)[3]}.amazonaws.com"])
      }
    }
  }
}

resource "aws_iam_role_policy" "floe" {
  name   = "floe-object-store"
  role   = aws_iam_role.floe.id
  policy = data.aws_iam_policy_document.floe.json
}

resource "aws_iam_role_policy_attachment" "ssm" {
  count      = var.enable_ssm ? 1 : 0
  role       = aws_iam_role.floe.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "floe" {
  name = "${var.name}-floe"
  role = aws_iam_role.floe.name

  tags = merge(local.tags, { Name = "${var.name}-floe" })
}
