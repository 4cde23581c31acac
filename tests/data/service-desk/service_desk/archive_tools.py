"""The desk's archive tools (MCP, one server for a whole evaluation): search the entries, read one. What reading
earns is the reward's to decide (service_desk/__init__.py)."""

import verifiers.v1 as vf

from service_desk.desk import TOWNS, archive_entry


class ArchiveToolset(vf.Toolset[vf.SharedToolsetConfig]):
    TOOL_PREFIX = "archive"

    @vf.tool
    def search(self, query: str) -> str:
        """Search the archive's entries by words of their titles, e.g. search(query="founding of Halverton");
        returns up to five entry ids with their titles."""
        words = {w.lower() for w in query.replace(",", " ").split() if len(w) >= 4}
        found = []
        for number in range(1000, 3000):
            title = f"The founding of {TOWNS[number % len(TOWNS)]}"
            if words & {w.lower() for w in title.split()}:
                found.append(f"DOC-{number} {title}")
            if len(found) == 5:
                break
        return "; ".join(found) or "no entry matches"

    @vf.tool
    def read(self, doc_id: str) -> str:
        """Read one archive entry by its id, e.g. read(doc_id="DOC-1000")."""
        return archive_entry(doc_id.strip()) or f"no entry {doc_id!r}"


if __name__ == "__main__":
    ArchiveToolset.run()
