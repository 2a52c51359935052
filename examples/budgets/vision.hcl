budget "ai2/vision" {
  share       = 15
  description = "Computer vision"
  owners      = ["vision-leads"]

  budget "perception" {
    share  = 30
    owners = ["perception-team"]
  }
  budget "video" {
    share  = 40
    owners = ["video-team"]
  }
  budget "geometry_3d" {
    share       = 30
    description = "3D reconstruction and scene understanding"
    owners      = ["geometry-team"]
  }
}
