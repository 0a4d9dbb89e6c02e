# Stateless agents: per pool (local.agent_pools: one of all roles, or produce
# and jobs agents beside fetch agents) a launch template and an autoscaling
# group across the agent subnets, scaled on the agents' own utilization (CPU,
# flush-buffer fill and produce latency against their targets;
# floe_agent_utilization, published to CloudWatch by floe-utilization.service
# on each agent). Each agent learns its zone from instance metadata at boot and
# passes it as --zone.

locals {
  # Where the agents publish AgentUtilization.
  utilization_namespace = "Floe"
}

moved {
  from = aws_launch_template.agent
  to   = aws_launch_template.agent["main"]
}

moved {
  from = aws_autoscaling_group.agent
  to   = aws_autoscaling_group.agent["main"]
}

moved {
  from = aws_autoscaling_policy.agent_utilization
  to   = aws_autoscaling_policy.agent_utilization["main"]
}

resource "aws_launch_template" "agent" {
  for_each      = local.agent_pools
  name_prefix   = "${each.value.asg_name}-"
  description   = "Floe agent (${each.value.roles})"
  image_id      = local.ami_id
  instance_type = each.value.instance_type
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
    publisher_script = templatefile("${path.module}/templates/publish-utilization.sh.tftpl", {
      metrics_url = "${local.tls_mode == "agent" ? "https" : "http"}://127.0.0.1:${local.http_port}/metrics"
      region      = local.region
      namespace   = local.utilization_namespace
      asg_name    = each.value.asg_name
    })
    publisher_unit = templatefile("${path.module}/templates/floe-utilization.service.tftpl", {
      region = local.region
    })
    prepare_script = templatefile("${path.module}/templates/prepare-agent.sh.tftpl", {
      advertised_address        = local.advertised_address
      advertised_host           = local.advertised_address == "load_balancer" ? local.endpoint_host : ""
      region                    = local.region
      tls_secret_arn            = local.tls_mode == "agent" ? var.tls_secret_arn : ""
      operator_token_secret_arn = var.operator_token_secret_arn == null ? "" : var.operator_token_secret_arn
      metadata_tls_secret_arn   = var.metadata_mtls ? aws_secretsmanager_secret.metadata_tls["agent"].arn : ""
      metadata_tls_serial       = local.metadata_tls_agent_serial
      secret_functions          = file("${path.module}/templates/secrets.sh")
    })
    unit = templatefile("${path.module}/templates/floe-agent.service.tftpl", {
      metadata_addrs           = local.metadata_addrs
      kafka_port               = local.kafka_port
      http_port                = local.http_port
      object_store_url         = local.object_store_url
      allow_unauthenticated    = var.allow_unauthenticated
      sasl_enable_plain        = var.sasl_enable_plain
      tls_mode                 = local.tls_mode
      operator_token           = var.operator_token_secret_arn != null
      metadata_mtls            = var.metadata_mtls
      max_connections          = var.max_connections
      max_connections_per_ip   = var.max_connections_per_ip
      auth_failures_per_minute = var.auth_failures_per_minute
      autoscale_cpu_target     = var.agent_cpu_target_percent / 100
      roles                    = each.value.roles
      peer_port                = strcontains(each.value.roles, "fetch") ? local.peer_port : 0
      extra_args               = join("", [for a in var.agent_extra_args : " ${a}"])
    })
  }))

  tag_specifications {
    resource_type = "instance"
    tags          = merge(local.tags, { Name = each.value.asg_name, "floe:role" = "agent", "floe:agent-roles" = each.value.roles })
  }

  tag_specifications {
    resource_type = "volume"
    tags          = merge(local.tags, { Name = each.value.asg_name, "floe:role" = "agent" })
  }

  tag_specifications {
    resource_type = "network-interface"
    tags          = merge(local.tags, { Name = each.value.asg_name, "floe:role" = "agent" })
  }

  tags = merge(local.tags, { Name = each.value.asg_name })

  # Agents read their metadata certificate at first boot: the secret must hold it.
  depends_on = [aws_secretsmanager_secret_version.metadata_tls]

  # Encrypted and authenticated unless the plan says otherwise, in so many
  # words (docs/DEPLOYMENT.md, "Encryption and authentication").
  lifecycle {
    precondition {
      condition     = var.allow_unauthenticated || var.tls_certificate_arn != null || var.tls_secret_arn != null
      error_message = "Floe needs TLS: set tls_certificate_arn (an ACM certificate; the load balancer terminates TLS) or tls_secret_arn (a Secrets Manager secret with the certificate and key; the agents terminate TLS). To run without TLS, SASL and API keys, set allow_unauthenticated = true."
    }

    precondition {
      condition     = var.tls_certificate_arn == null || var.tls_secret_arn == null
      error_message = "Set tls_certificate_arn or tls_secret_arn, not both."
    }

    precondition {
      condition     = !var.sasl_enable_plain || (!var.allow_unauthenticated && (var.tls_certificate_arn != null || var.tls_secret_arn != null))
      error_message = "sasl_enable_plain sends passwords in the clear: it needs TLS (tls_certificate_arn or tls_secret_arn) and allow_unauthenticated = false."
    }

    precondition {
      condition     = var.tls_certificate_arn == null || local.advertised_address == "load_balancer"
      error_message = "With tls_certificate_arn the agents speak plaintext behind the load balancer, so agent_advertised_address must be load_balancer (or null)."
    }

    precondition {
      condition     = var.tls_certificate_arn == null || var.client_endpoint_dns_name != null
      error_message = "tls_certificate_arn needs client_endpoint_dns_name: the name the certificate covers, which clients connect to and agents advertise."
    }

    precondition {
      condition     = var.agent_fetch_pool == null || local.advertised_address != "load_balancer"
      error_message = "agent_fetch_pool needs agents that advertise their own addresses (agent_advertised_address private_ip or private_dns, and tls_secret_arn rather than tls_certificate_arn): behind one load balancer address a client cannot choose a fetch agent."
    }

    precondition {
      condition     = var.operator_token_secret_arn == null || var.tls_certificate_arn != null || var.tls_secret_arn != null
      error_message = "operator_token_secret_arn serves the operator API on the client port: it needs TLS (tls_certificate_arn or tls_secret_arn) so the token never crosses the network in the clear."
    }
  }
}

resource "aws_autoscaling_group" "agent" {
  for_each                  = local.agent_pools
  name                      = each.value.asg_name
  vpc_zone_identifier       = var.agent_subnet_ids
  min_size                  = each.value.min_size
  max_size                  = each.value.max_size
  health_check_type         = "ELB"
  health_check_grace_period = 300
  default_instance_warmup   = 120
  # Its own Kafka bootstrap, and the HTTP API (any agent serves it).
  target_group_arns    = [aws_lb_target_group.agent[each.value.kafka_target].arn, aws_lb_target_group.agent["http"].arn]
  termination_policies = ["OldestLaunchTemplate", "OldestInstance"]
  enabled_metrics      = ["GroupDesiredCapacity", "GroupInServiceInstances", "GroupMaxSize", "GroupMinSize"]

  launch_template {
    id      = aws_launch_template.agent[each.key].id
    version = aws_launch_template.agent[each.key].latest_version
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
    for_each = merge(local.tags, { Name = each.value.asg_name, "floe:role" = "agent" })
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
      condition     = each.value.min_size <= each.value.max_size
      error_message = "agent_min_size must not exceed agent_max_size."
    }
  }
}

# The group follows the agents' average utilization (1 = every agent at its
# CPU, buffer and latency targets) rather than CPU alone: an agent bound by
# its flush buffer or by slow PUTs needs company before its CPU shows it.
resource "aws_autoscaling_policy" "agent_utilization" {
  for_each                  = local.agent_pools
  name                      = "${each.value.asg_name}-utilization"
  autoscaling_group_name    = aws_autoscaling_group.agent[each.key].name
  policy_type               = "TargetTrackingScaling"
  estimated_instance_warmup = 120

  target_tracking_configuration {
    customized_metric_specification {
      namespace   = local.utilization_namespace
      metric_name = "AgentUtilization"
      statistic   = "Average"
      unit        = "None"

      metric_dimension {
        name  = "AutoScalingGroupName"
        value = each.value.asg_name
      }
    }
    target_value = var.agent_utilization_target
  }
}

moved {
  from = aws_autoscaling_policy.agent_cpu
  to   = aws_autoscaling_policy.agent_utilization
}
