"""What tests share across modules and tiers (tests/<tier>/ import them as `helpers.<module>`)."""
