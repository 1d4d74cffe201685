"""Services for hosting the app for many people at once (a workshop room), testable without Streamlit.

`limits` (one typed object of caps, a single-user and a room profile), `queue` (one compute queue for the
server, fair per participant), `spaces` (a private folder per participant), `jobs` (background jobs with owners,
a global cap and a host secret), `secret` (the host secret checked with a limit on wrong guesses, and advice on
its strength), `training` (training runs typed once as a `TrainRequest`, and data builds, planned, started,
stopped and owned through the job board, in every profile), `settings` (the room's settings from the environment
or a small TOML file), `guarded` (the work a page asks for, checked against the caps where it is done). The
engine never imports this package; the app calls it (through `tevcore.studio` for the heavy work).
"""
