"""Schedules and the passes that build them: lowering output -> optimized, range-checked, memory-planned."""
