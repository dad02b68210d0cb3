"""What answers an update: messages and media to the turn, user and admin commands, the access gate."""
