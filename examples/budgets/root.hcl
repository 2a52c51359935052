# The institute's GPU time, split among programs. Shares are relative weights
# among siblings; they need not sum to 100 (these happen to).
#
# Each program keeps its subtree in its own file (prior.hcl, nlp.hcl, ...),
# attached here by its full path, so that each can be owned by its program in
# CODEOWNERS and reviewed in its own pull requests.
budget "ai2" {
  description = "Institute GPU time on the shared H100 and B200 clusters"
  owners      = ["program-office"]

  # Shared tooling, cluster burn-in and benchmarks after repairs.
  budget "infra" {
    share       = 10
    description = "Cluster platform, burn-in and regression benchmarks"
    owners      = ["infra-oncall"]
  }
}
