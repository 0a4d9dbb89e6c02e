# CloudWatch alarms on what AWS measures without an agent on the instance:
# agent CPU (saturation), load balancer target health (per target group and,
# because cross-zone is off, per zone) and metadata instance status checks.
# Floe's own metrics (request rates, flush latency, object-store errors) are
# scraped by Prometheus: see the prometheus_scrape_config output.

data "aws_subnet" "agent" {
  for_each = toset(var.agent_subnet_ids)
  id       = each.value
}

locals {
  agent_azs = toset([for s in data.aws_subnet.agent : s.availability_zone])
}

moved {
  from = aws_cloudwatch_metric_alarm.agent_cpu_high
  to   = aws_cloudwatch_metric_alarm.agent_cpu_high["main"]
}

resource "aws_cloudwatch_metric_alarm" "agent_cpu_high" {
  for_each            = local.agent_pools
  alarm_name          = "${each.value.asg_name}-cpu-high"
  alarm_description   = "Floe agents (${each.value.roles}) average above ${var.agent_cpu_alarm_percent}% CPU for 15 minutes: the group is at its max size or cannot scale out. Latency will rise."
  namespace           = "AWS/EC2"
  metric_name         = "CPUUtilization"
  dimensions          = { AutoScalingGroupName = aws_autoscaling_group.agent[each.key].name }
  statistic           = "Average"
  period              = 300
  evaluation_periods  = 3
  threshold           = var.agent_cpu_alarm_percent
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "missing"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions

  tags = merge(local.tags, { Name = "${each.value.asg_name}-cpu-high" })
}

resource "aws_cloudwatch_metric_alarm" "nlb_unhealthy_hosts" {
  for_each            = aws_lb_target_group.agent
  alarm_name          = "${var.name}-${each.key}-unhealthy-hosts"
  alarm_description   = "An agent in the ${each.key} target group has failed /readyz for 3 minutes. The autoscaling group replaces it; if this persists, check the agent's journal (journalctl -u floe-agent)."
  namespace           = "AWS/NetworkELB"
  metric_name         = "UnHealthyHostCount"
  dimensions          = { LoadBalancer = aws_lb.this.arn_suffix, TargetGroup = each.value.arn_suffix }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 3
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions

  tags = merge(local.tags, { Name = "${var.name}-${each.key}-unhealthy-hosts" })
}

resource "aws_cloudwatch_metric_alarm" "nlb_zone_without_agents" {
  for_each            = local.agent_azs
  alarm_name          = "${var.name}-kafka-no-healthy-agent-${each.value}"
  alarm_description   = "No healthy agent behind the load balancer in ${each.value} for 3 minutes. Cross-zone load balancing is off, so clients resolving this zone's address have no local agent."
  namespace           = "AWS/NetworkELB"
  metric_name         = "HealthyHostCount"
  dimensions          = { LoadBalancer = aws_lb.this.arn_suffix, TargetGroup = aws_lb_target_group.agent["kafka"].arn_suffix, AvailabilityZone = each.value }
  statistic           = "Minimum"
  period              = 60
  evaluation_periods  = 3
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions

  tags = merge(local.tags, { Name = "${var.name}-kafka-no-healthy-agent-${each.value}" })
}

resource "aws_cloudwatch_metric_alarm" "metadata_system_status" {
  for_each            = aws_instance.metadata
  alarm_name          = "${var.name}-metadata-${each.key}-system-status"
  alarm_description   = "The host under metadata node ${each.key} failed its system status check; EC2 recovers the instance onto new hardware (same ID, IP and volumes)."
  namespace           = "AWS/EC2"
  metric_name         = "StatusCheckFailed_System"
  dimensions          = { InstanceId = each.value.id }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 2
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "missing"
  alarm_actions       = concat(["arn:${local.partition}:automate:${local.region}:ec2:recover"], var.alarm_actions)
  ok_actions          = var.alarm_actions

  tags = merge(local.tags, { Name = "${var.name}-metadata-${each.key}-system-status" })
}

resource "aws_cloudwatch_metric_alarm" "metadata_instance_status" {
  for_each            = aws_instance.metadata
  alarm_name          = "${var.name}-metadata-${each.key}-instance-status"
  alarm_description   = "Metadata node ${each.key} failed its instance status check for 5 minutes (OS hung, disk full, network misconfigured). The cluster keeps quorum with two nodes; see docs/OPERATIONS.md to replace this one."
  namespace           = "AWS/EC2"
  metric_name         = "StatusCheckFailed_Instance"
  dimensions          = { InstanceId = each.value.id }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 5
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "missing"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions

  tags = merge(local.tags, { Name = "${var.name}-metadata-${each.key}-instance-status" })
}
