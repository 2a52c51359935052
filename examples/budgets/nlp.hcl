budget "ai2/nlp" {
  share       = 20
  description = "Language research outside the flagship models"
  owners      = ["nlp-leads"]

  budget "reasoning" {
    share  = 40
    owners = ["reasoning-team"]
  }
  budget "safety" {
    share  = 25
    owners = ["safety-team"]
  }
  budget "semantic-scholar" {
    share       = 35
    description = "Scientific literature models and search"
    owners      = ["s2-research"]
  }
}
