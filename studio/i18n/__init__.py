"""The page's languages (English, Chinese): ``page`` holds the page's own texts and the switch, ``help`` the fields'
help texts, ``localize`` translates engine messages with the tables beside it (one module per engine part).
The engine's catalogs (English) live beside their parts: ``engine/*/messages.py``."""
