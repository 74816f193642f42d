"""Builders of tiny captures and Pilot helpers shared by the tests."""
