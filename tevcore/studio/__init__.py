"""Page services: what a page of the app asks for, as typed requests and results, with the caps and the compute
queue taken inside the service. The app collects input and renders; it never copies the math done here.

`lessons` (the workshop's lessons as data: a setting, a question, a truth the package computes, an explanation)
and `lesson_service` (a lesson's truth computed once per setting through the compute queue, a participant's
progress as one typed object).
"""
