# A subtree two levels down, attached by full path from its own file.
budget "ai2/prior/olmo" {
  share       = 60
  description = "Open language models"
  owners      = ["olmo-leads"]

  budget "pretrain" {
    share       = 55
    description = "Base model pretraining runs"
    owners      = ["olmo-pretrain"]
  }
  budget "posttrain" {
    share       = 30
    description = "Instruction tuning and RL"
    owners      = ["olmo-posttrain"]
  }
  budget "evals" {
    share       = 15
    description = "Evaluation suites and decontamination"
    owners      = ["olmo-evals"]
  }
}
