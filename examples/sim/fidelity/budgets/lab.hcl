# The budgets of the fidelity traces: two teams, a with twice b's share.
budget "lab" {

  budget "a" {
    share = 2
  }
  budget "b" {
    share = 1
  }
}
