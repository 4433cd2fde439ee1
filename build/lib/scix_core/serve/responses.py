"""JSON bodies serialised once by orjson. A handler's plain ``dict`` would go through FastAPI's
``jsonable_encoder`` (a recursive copy) and then ``json.dumps``; the command line's ``--json`` outputs are
plain JSON types already."""

from __future__ import annotations

import orjson
from fastapi.responses import JSONResponse


class Json(JSONResponse):
    def render(self, content) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)
