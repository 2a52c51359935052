budget "ai2/robotics" {
  share       = 15
  description = "Embodied AI"
  owners      = ["robotics-leads"]

  budget "manipulation" {
    share  = 50
    owners = ["manipulation-team"]
  }
  budget "navigation" {
    share  = 30
    owners = ["navigation-team"]
  }
  budget "simulation" {
    share       = 20
    description = "Simulators and synthetic environments"
    owners      = ["sim-team"]
  }
}
