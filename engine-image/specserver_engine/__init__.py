"""What runs in the engine pod: preflight, argument composition, and the simulated engine."""
