budget "ai2/prior" {
  share       = 40
  description = "Open language and multimodal models"
  owners      = ["prior-leads"]

  # olmo has enough teams to own its own file: see olmo.hcl.

  budget "molmo" {
    share       = 25
    description = "Open multimodal models"
    owners      = ["molmo-team"]
  }

  budget "data" {
    share       = 15
    description = "Pretraining corpora: filtering, deduplication, classifiers"
    owners      = ["data-team"]
  }
}
