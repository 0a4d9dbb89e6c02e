# Stateless agents: a launch template and an autoscaling group across the agent
# subnets, scaled by average CPU. Each agent learns its zone from instance
# metadata at boot and passes it as --zone.

resource "aws_launch_template" "agent" {
  name_prefix   = "${var.name}-agent-"
  description   = "Floe agent"
  image_id      = local.ami_id
  instance_type = var.agent_instance_type
  ebs_optimized = true

  iam_instance_profile {
    arn = aws_iam_instance_profile.floe.arn
  }

  network_interfaces {
    associate_public_ip_address = false
    delete_on_termination       = true
    security_groups             = [aws_security_group.agent.id]
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
    instance_metadata_tags      = "disabled"
  }

  monitoring {
    enabled = true
  }

  block_device_mappings {
    device_name = "/dev/xvda"

    ebs {
      volume_type           = "gp3"
      volume_size           = var.agent_volume_size_gib
      encrypted             = true
      kms_key_id            = var.ebs_kms_key_arn
      delete_on_termination = true
    }
  }

  user_data = base64encode(templatefile("${path.module}/templates/cloud-init.yaml.tftpl", {
    role           = "agent"
    unit_name      = "floe-agent.service"
    install_script = local.install_script
    prepare_script = templatefile("${path.module}/templates/prepare-agent.sh.tftpl", {
      advertised_address = var.agent_advertised_address
      region             = local.region
    })
    unit = templatefile("${path.module}/templates/floe-agent.service.tftpl", {
      metadata_addrs   = local.metadata_addrs
      kafka_port       = local.kafka_port
      http_port        = local.http_port
      object_store_url = local.object_store_url
      extra_args       = join("", [for a in var.agent_extra_args : " ${a}"])
    })
  }))

  tag_specifications {
    resource_type = "instance"
    tags          = merge(local.tags, { Name = "${var.name}-agent", "floe:role" = "agent" })
  }

  tag_specifications {
    resource_type = "volume"
    tags          = merge(local.tags, { Name = "${var.name}-agent", "floe:role" = "agent" })
  }

  tag_specifications {
    resource_type = "network-interface"
    tags          = merge(local.tags, { Name = "${var.name}-agent", "floe:role" = "agent" })
  }

  tags = merge(local.tags, { Name = "${var.name}-agent" })
}

resource "aws_autoscaling_group" "agent" {
  name                      = "${var.name}-agent"
  vpc_zone_identifier       = var.agent_subnet_ids
  min_size                  = var.agent_min_size
  max_size                  = var.agent_max_size
  health_check_type         = "ELB"
  health_check_grace_period = 300
  default_instance_warmup   = 120
  target_group_arns         = [for tg in aws_lb_target_group.agent : tg.arn]
  termination_policies      = ["OldestLaunchTemplate", "OldestInstance"]
  enabled_metrics           = ["GroupDesiredCapacity", "GroupInServiceInstances", "GroupMaxSize", "GroupMinSize"]

  launch_template {
    id      = aws_launch_template.agent.id
    version = aws_launch_template.agent.latest_version
  }

  # A new launch template version (binary, AMI, flags) rolls the group: at
  # most 10% of agents are replaced at a time, each new one must pass /readyz.
  instance_refresh {
    strategy = "Rolling"

    preferences {
      min_healthy_percentage = 90
      instance_warmup        = 120
      auto_rollback          = true
    }
  }

  dynamic "tag" {
    for_each = merge(local.tags, { Name = "${var.name}-agent", "floe:role" = "agent" })
    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = true
    }
  }

  lifecycle {
    # Target tracking owns the desired capacity after the first apply.
    ignore_changes = [desired_capacity]

    precondition {
      condition     = var.agent_min_size <= var.agent_max_size
      error_message = "agent_min_size must not exceed agent_max_size."
    }
  }
}

resource "aws_autoscaling_policy" "agent_cpu" {
  name                      = "${var.name}-agent-cpu"
  autoscaling_group_name    = aws_autoscaling_group.agent.name
  policy_type               = "TargetTrackingScaling"
  estimated_instance_warmup = 120

  target_tracking_configuration {
    predefined_metric_specification {
      predefined_metric_type = "ASGAverageCPUUtilization"
    }
    target_value = var.agent_cpu_target_percent
  }
}
