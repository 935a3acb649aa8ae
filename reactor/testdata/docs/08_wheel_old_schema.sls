remove_key:
  wheel.key.delete:
    - match: {{ data['id'] }}
