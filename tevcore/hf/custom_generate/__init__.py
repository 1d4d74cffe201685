"""The folder transformers loads by path (`custom_generate=tevcore.hf.CUSTOM_GENERATE_FOLDER`): its generate.py.

A package so that an installed tevcore (not only a checkout) ships the file.
"""
