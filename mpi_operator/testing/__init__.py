"""Test support shipped with the operator: object builders for specs and e2e tests."""
