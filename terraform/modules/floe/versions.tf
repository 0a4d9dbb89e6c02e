terraform {
  # Written and checked against 1.5+ (preconditions and startswith() need 1.3).
  required_version = ">= 1.5.0, < 2.0.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 5.40 is the oldest 5.x release with every resource and argument used here
      # (NLB security groups, aws_vpc_security_group_*_rule).
      version = "~> 5.40"
    }
    tls = {
      source = "hashicorp/tls"
      # 4.0 is the first release with private_key_pem_pkcs8 and without the
      # key_algorithm arguments of 3.x.
      version = "~> 4.0"
    }
  }
}
