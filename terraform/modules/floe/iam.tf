# Two roles, one for the agents and one for the metadata nodes. Both read and
# write objects under the prefix (segments; metadata snapshots) and nothing
# else in S3. Each may also read its own secrets (local.agent_secret_arns,
# local.metadata_secret_arns), by their full ARNs, and nothing else in Secrets
# Manager: an agent cannot read a metadata node's certificate, so a host taken
# over as an agent cannot act as a peer on the metadata port; neither role can
# read the operator's.

data "aws_iam_policy_document" "assume_ec2" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

# The agents' role (its name predates the metadata nodes' own role).
resource "aws_iam_role" "floe" {
  name               = "${var.name}-floe"
  description        = "Floe agents: objects under s3://${local.bucket_name}/${var.bucket_prefix}/ only."
  assume_role_policy = data.aws_iam_policy_document.assume_ec2.json

  tags = merge(local.tags, { Name = "${var.name}-floe" })
}

resource "aws_iam_role" "metadata" {
  name               = "${var.name}-metadata"
  description        = "Floe metadata nodes: objects under s3://${local.bucket_name}/${var.bucket_prefix}/ only."
  assume_role_policy = data.aws_iam_policy_document.assume_ec2.json

  tags = merge(local.tags, { Name = "${var.name}-metadata" })
}

# What both roles may do.
data "aws_iam_policy_document" "objects" {
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
}

# Each role's secrets: read only (no listing, no describing, no writing), and
# with secrets_kms_key_arn, decrypt through Secrets Manager only.
data "aws_iam_policy_document" "agent" {
  source_policy_documents = [data.aws_iam_policy_document.objects.json]

  # The autoscaling signal (floe-utilization.service): PutMetricData names no
  # resource, so it is held to Floe's namespace by condition.
  statement {
    sid       = "FloeUtilizationMetric"
    actions   = ["cloudwatch:PutMetricData"]
    resources = ["*"]

    condition {
      test     = "StringEquals"
      variable = "cloudwatch:namespace"
      values   = [local.utilization_namespace]
    }
  }

  dynamic "statement" {
    for_each = length(local.agent_secret_arns) == 0 ? [] : [local.agent_secret_arns]
    content {
      sid       = "FloeSecrets"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = statement.value
    }
  }

  dynamic "statement" {
    for_each = var.secrets_kms_key_arn == null || length(local.agent_secret_arns) == 0 ? [] : [var.secrets_kms_key_arn]
    content {
      sid       = "FloeSecretsKey"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = [for r in local.agent_secret_regions : "secretsmanager.${r}.amazonaws.com"]
      }
    }
  }
}

data "aws_iam_policy_document" "metadata" {
  source_policy_documents = [data.aws_iam_policy_document.objects.json]

  dynamic "statement" {
    for_each = length(local.metadata_secret_arns) == 0 ? [] : [local.metadata_secret_arns]
    content {
      sid       = "FloeSecrets"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = statement.value
    }
  }

  dynamic "statement" {
    for_each = var.secrets_kms_key_arn == null || length(local.metadata_secret_arns) == 0 ? [] : [var.secrets_kms_key_arn]
    content {
      sid       = "FloeSecretsKey"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = [for r in local.metadata_secret_regions : "secretsmanager.${r}.amazonaws.com"]
      }
    }
  }
}

resource "aws_iam_role_policy" "floe" {
  name   = "floe-object-store"
  role   = aws_iam_role.floe.id
  policy = data.aws_iam_policy_document.agent.json
}

resource "aws_iam_role_policy" "metadata" {
  name   = "floe-object-store"
  role   = aws_iam_role.metadata.id
  policy = data.aws_iam_policy_document.metadata.json
}

resource "aws_iam_role_policy_attachment" "ssm" {
  count      = var.enable_ssm ? 1 : 0
  role       = aws_iam_role.floe.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_role_policy_attachment" "metadata_ssm" {
  count      = var.enable_ssm ? 1 : 0
  role       = aws_iam_role.metadata.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "floe" {
  name = "${var.name}-floe"
  role = aws_iam_role.floe.name

  tags = merge(local.tags, { Name = "${var.name}-floe" })
}

resource "aws_iam_instance_profile" "metadata" {
  name = "${var.name}-metadata"
  role = aws_iam_role.metadata.name

  tags = merge(local.tags, { Name = "${var.name}-metadata" })
}
