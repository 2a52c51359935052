# The heavy-tailed suite scenarios' budgets: 22 teams of uneven shares under 4 programs
# (the issue-12 shape: "20+ uneven teams under 4 programs").
budget "lab" {
  description = "A research lab's shared GPU pool"

  budget "llm" {
    share = 45
    budget "pretrain" {
      share = 40
    }
    budget "posttrain" {
      share = 20
    }
    budget "evals" {
      share = 8
    }
    budget "data" {
      share = 7
    }
    budget "safety" {
      share = 10
    }
    budget "code" {
      share = 15
    }
  }
  budget "vision" {
    share = 25
    budget "detection" {
      share = 25
    }
    budget "video" {
      share = 30
    }
    budget "3d" {
      share = 15
    }
    budget "generation" {
      share = 20
    }
    budget "robot-vision" {
      share = 10
    }
  }
  budget "science" {
    share = 18
    budget "protein" {
      share = 35
    }
    budget "climate" {
      share = 20
    }
    budget "materials" {
      share = 15
    }
    budget "chemistry" {
      share = 12
    }
    budget "physics" {
      share = 10
    }
    budget "astro" {
      share = 8
    }
  }
  budget "platform" {
    share = 12
    budget "infra" {
      share = 30
    }
    budget "benchmarks" {
      share = 15
    }
    budget "compilers" {
      share = 20
    }
    budget "inference" {
      share = 35
    }
    budget "sandbox" {
      share = 5
    }
  }
}
