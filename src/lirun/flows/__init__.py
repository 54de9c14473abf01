"""Flows: a graph of agent and command legs run as one invocation."""
