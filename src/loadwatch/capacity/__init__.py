"""`loadwatch capacity`: the most load a server sustains within SLOs, and the limit that binds."""
