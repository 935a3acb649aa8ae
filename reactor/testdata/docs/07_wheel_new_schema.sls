remove_key:
  wheel.key.delete:
    - args:
      - match: {{ data['id'] }}
