"""The maths of the trainer as pure functions: returns and advantages, policy losses."""
