"""Teams: a persistent inbox that agents working side by side use to tell each other
what they are doing (docs/teams.md).

``rules`` holds the pure decisions (names, message bounds, who may send what to whom);
the store applies them under the team row's lock. ``follow`` streams a member's inbox,
woken by the same machinery as ``li wait``; ``membership`` gives owners (flows, shows)
their team, its environment and the prompt preamble.
"""
