# Three metadata nodes, one per availability zone. Each has its own encrypted
# EBS data volume, created apart from the instance so that replacing the
# instance (new AMI, failed host) keeps the Raft log, and a stable DNS name.

resource "aws_ebs_volume" "metadata" {
  for_each          = local.metadata_nodes
  availability_zone = each.value.az
  size              = var.metadata_volume_size_gib
  type              = var.metadata_volume_type
  iops              = var.metadata_volume_iops
  throughput        = var.metadata_volume_type == "gp3" ? 250 : null
  encrypted         = true
  kms_key_id        = var.ebs_kms_key_arn

  tags = merge(local.tags, {
    Name           = "${var.name}-metadata-${each.key}"
    "floe:role"    = "metadata"
    "floe:node-id" = each.key
  })
}

resource "aws_instance" "metadata" {
  for_each               = local.metadata_nodes
  ami                    = local.ami_id
  instance_type          = var.metadata_instance_type
  subnet_id              = each.value.subnet_id
  vpc_security_group_ids = [aws_security_group.metadata.id]
  iam_instance_profile   = aws_iam_instance_profile.metadata.name
  ebs_optimized          = true
  monitoring             = true

  user_data = templatefile("${path.module}/templates/cloud-init.yaml.tftpl", {
    role           = "metadata node ${each.key}"
    unit_name      = "floe-metadata.service"
    install_script = local.install_script
    # Only agents publish the autoscaling signal.
    publisher_script = ""
    publisher_unit   = ""
    prepare_script = templatefile("${path.module}/templates/prepare-metadata.sh.tftpl", {
      node_id                   = each.key
      fqdn                      = each.value.fqdn
      volume_id                 = aws_ebs_volume.metadata[each.key].id
      volume_serial             = replace(aws_ebs_volume.metadata[each.key].id, "-", "")
      region                    = local.region
      metadata_tls_secret_arn   = var.metadata_mtls ? aws_secretsmanager_secret.metadata_tls["peer-${each.key}"].arn : ""
      operator_token_secret_arn = var.operator_token_secret_arn == null ? "" : var.operator_token_secret_arn
      secret_functions          = file("${path.module}/templates/secrets.sh")
    })
    unit = templatefile("${path.module}/templates/floe-metadata.service.tftpl", {
      node_id          = each.key
      fqdn             = each.value.fqdn
      metadata_port    = local.metadata_port
      metrics_port     = local.metadata_metrics_port
      peers            = local.metadata_peers
      object_store_url = local.object_store_url
      metadata_mtls    = var.metadata_mtls
      operator_token   = var.operator_token_secret_arn != null
    })
  })

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
    instance_metadata_tags      = "disabled"
  }

  root_block_device {
    volume_type           = "gp3"
    volume_size           = 20
    encrypted             = true
    kms_key_id            = var.ebs_kms_key_arn
    delete_on_termination = true
    tags                  = merge(local.tags, { Name = "${var.name}-metadata-${each.key}-root" })
  }

  tags = merge(local.tags, {
    Name           = "${var.name}-metadata-${each.key}"
    "floe:role"    = "metadata"
    "floe:node-id" = each.key
  })

  # The node reads its certificate at first boot: the secret must hold it.
  depends_on = [aws_secretsmanager_secret_version.metadata_tls]

  lifecycle {
    # A new AMI or user data must never replace all three nodes in one apply
    # (that would lose quorum). Roll them one at a time instead with
    # `terraform apply -replace='module.floe.aws_instance.metadata["N"]'`.
    ignore_changes = [ami, user_data]

    precondition {
      condition     = length(distinct([for n in local.metadata_nodes : n.az])) == 3
      error_message = "metadata_subnet_ids must be in three different availability zones."
    }
  }
}

resource "aws_volume_attachment" "metadata" {
  for_each    = local.metadata_nodes
  device_name = "/dev/sdf"
  volume_id   = aws_ebs_volume.metadata[each.key].id
  instance_id = aws_instance.metadata[each.key].id

  # Stop floe (and the instance) cleanly before the volume is detached.
  stop_instance_before_detaching = true
}
