"""Services for hosting the app for many people at once (a workshop room), testable without Streamlit.

`limits` (one typed object of caps, a single-user and a room profile), `queue` (one compute queue for the
server), `spaces` (a private folder per participant), `jobs` (background jobs with owners, a global cap and a
host secret), `training` (training runs and data builds planned, started, stopped and owned through the job
board, in every profile), `settings` (the room's settings from the environment or a small TOML file), `guarded`
(the work a page asks for, checked against the caps where it is done). The engine never imports this package;
the app calls it.
"""
