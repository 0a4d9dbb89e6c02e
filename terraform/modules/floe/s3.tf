# The bucket is Floe's only durable store: segments and metadata snapshots live
# under var.bucket_prefix. Nothing here is public, every request must use TLS,
# and only the Floe roles (agents', metadata nodes') and listed admins may
# touch objects.

resource "aws_s3_bucket" "this" {
  #checkov:skip=CKV_AWS_144:Cross-region replication doubles storage and PUT cost; S3 already stores objects across three AZs. Customers who need a second region replicate with their own rule.
  #checkov:skip=CKV2_AWS_62:Floe learns of new objects through its metadata service; S3 event notifications have no consumer.
  #checkov:skip=CKV_AWS_145:SSE-KMS is optional (var.kms_key_arn). The default SSE-S3 avoids a KMS request charge on Floe's PUT/GET-heavy workload.
  #checkov:skip=CKV_AWS_18:Access logging is optional (var.access_log_bucket); the target bucket belongs to the customer.
  bucket              = local.bucket_name
  force_destroy       = var.bucket_force_destroy
  object_lock_enabled = var.object_lock_enabled

  tags = merge(local.tags, { Name = local.bucket_name })

  lifecycle {
    precondition {
      condition     = !var.object_lock_enabled || var.bucket_versioning_enabled
      error_message = "object_lock_enabled needs bucket_versioning_enabled = true."
    }
  }
}

resource "aws_s3_bucket_public_access_block" "this" {
  bucket                  = aws_s3_bucket.this.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "this" {
  bucket = aws_s3_bucket.this.id

  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "this" {
  bucket = aws_s3_bucket.this.id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.kms_key_arn == null ? "AES256" : "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    # One KMS data key per bucket instead of one per object (no effect on SSE-S3).
    bucket_key_enabled = var.kms_key_arn != null
  }
}

resource "aws_s3_bucket_versioning" "this" {
  bucket = aws_s3_bucket.this.id

  versioning_configuration {
    status = var.bucket_versioning_enabled ? "Enabled" : "Suspended"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "this" {
  bucket = aws_s3_bucket.this.id

  # Parts of a multipart upload whose agent died mid-flush are invisible to
  # Floe's garbage collection (they are not objects yet); S3 removes them.
  rule {
    id     = "abort-incomplete-multipart-uploads"
    status = "Enabled"

    filter {}

    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_incomplete_multipart_upload_days
    }
  }

  # With versioning on, objects Floe deletes (compaction, retention, GC) stay
  # recoverable for a while and are then removed for good.
  rule {
    id     = "expire-noncurrent-versions"
    status = var.bucket_versioning_enabled ? "Enabled" : "Disabled"

    filter {}

    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_version_expiration_days
    }

    expiration {
      expired_object_delete_marker = true
    }
  }

  depends_on = [aws_s3_bucket_versioning.this]
}

resource "aws_s3_bucket_logging" "this" {
  count         = var.access_log_bucket == null ? 0 : 1
  bucket        = aws_s3_bucket.this.id
  target_bucket = var.access_log_bucket
  target_prefix = "s3-access/${local.bucket_name}/"
}

data "aws_iam_policy_document" "bucket" {
  statement {
    sid     = "DenyInsecureTransport"
    effect  = "Deny"
    actions = ["s3:*"]
    resources = [
      local.bucket_arn,
      "${local.bucket_arn}/*",
    ]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }

  # Object data is for Floe alone: any other principal of this or another
  # account is denied, whatever its IAM policies say. Bucket configuration
  # (policy, lifecycle, encryption) stays manageable by the account's admins.
  statement {
    sid    = "DenyObjectAccessExceptFloe"
    effect = "Deny"
    actions = [
      "s3:GetObject",
      "s3:GetObjectVersion",
      "s3:PutObject",
      "s3:DeleteObject",
      "s3:DeleteObjectVersion",
      "s3:AbortMultipartUpload",
    ]
    resources = ["${local.bucket_arn}/*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "ArnNotEquals"
      variable = "aws:PrincipalArn"
      values   = concat(local.instance_role_arns, var.bucket_admin_principal_arns)
    }
  }

  statement {
    sid    = "AllowFloeObjects"
    effect = "Allow"
    actions = [
      "s3:GetObject",
      "s3:PutObject",
      "s3:DeleteObject",
      "s3:AbortMultipartUpload",
      "s3:ListMultipartUploadParts",
    ]
    resources = [local.prefix_object_arn]

    principals {
      type        = "AWS"
      identifiers = local.instance_role_arns
    }
  }

  statement {
    sid       = "AllowFloeList"
    effect    = "Allow"
    actions   = ["s3:ListBucket"]
    resources = [local.bucket_arn]

    principals {
      type        = "AWS"
      identifiers = local.instance_role_arns
    }

    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["${var.bucket_prefix}/*", var.bucket_prefix]
    }
  }
}

resource "aws_s3_bucket_policy" "this" {
  bucket = aws_s3_bucket.this.id
  policy = data.aws_iam_policy_document.bucket.json

  # A public-access block must exist before a policy is attached, or S3 may
  # evaluate the policy against an unprotected bucket.
  depends_on = [aws_s3_bucket_public_access_block.this]
}
