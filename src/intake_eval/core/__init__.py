"""The foundation every stage stands on: errors, records, the store (paths), the manifest, prompts, progress."""
